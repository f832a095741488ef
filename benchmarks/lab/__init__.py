"""What costtune does not ship: mechanisms kept for the benchmarks' ablations."""
