"""`leteo-fed simulate`: many virtual owners in a few processes against a real CSP and aggregator.

A load test a site can run before go-live (docs/simulation.md). Each virtual owner is the real
owner agent (`owner_agent.service.OwnerAgentService`: authorization, policy, audit log, privacy
ledger, share building, signing) with its own certificate, signing key, data file and mTLS
connection; only its transport and start-up differ (`virtual_owner`). Modules:

- `data`: the seeded synthetic rows, one file per owner, and the pooled reference;
- `loop_stub`: a blocking face on a grpc.aio stub, for the owner's calls from worker threads;
- `virtual_owner`: the owner agent on a shared event loop and thread pool;
- `worker`: the process hosting a slice of the virtual owners;
- `measure`: CPU and memory of processes, latency percentiles;
- `report`: the table and the JSON report;
- `driver`: certificates, CSP and aggregator, workers, the analyst's round, the checks.
"""
