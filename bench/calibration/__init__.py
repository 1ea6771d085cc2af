"""Threshold calibration on DEV splits: `ragmend bench diagnosis` (diagnosis.py: query-hypothesis
constructions and the aggregation thresholds) and `ragmend bench kg` (kg_align.py: the KG
alignment thresholds)."""
