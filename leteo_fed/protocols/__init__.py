"""Protocol math and protocol objects as pure code: what the services compute, testable without a
network. `registry` finds every protocol by its payload name."""
