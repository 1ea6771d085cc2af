"""The evaluation suites, each writing its report: `ragmend eval --suite paper|poison|ragtruth`
(paper.py; poison.py with its answer judge truth_judge.py; ragtruth.py with ragtruth_report.py) and
`ragmend bench nli --suite` (nli.py, a section of docs/nli.md)."""
