"""The worker: what runs inside a cell's process or container. Stdlib only (and the workload's
own imports); this package is the code every stack image carries."""
