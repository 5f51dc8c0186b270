"""What hardware is, below everything that plans, runs or reports on it: this machine as
detected (local.py) and the peaks a device is judged against, from GPU datasheets and a
CPU's cores (peaks.py). It imports only the worker package and the standard library. A
provider's catalogue of machine sizes is its own (EC2's: providers/aws/catalogue.py), asked
through the provider."""
