"""Speed benchmarks (measured here, never in tests): `ragmend bench pipeline|startup|load|policy`
(pipeline.py, startup.py, load.py, policy.py) and the knowledge graph's figures
(`python -m ragmend.bench.speed.kg`, kg.py)."""
