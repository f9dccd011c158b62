"""The in-process engine: pyarrow reads and writes, NumPy does the work (inputs that fit in
memory)."""
