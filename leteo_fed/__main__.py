from leteo_fed.cli.main import console

if __name__ == "__main__":  # spawned worker processes import this module too
    raise SystemExit(console())
