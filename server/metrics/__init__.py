"""Prometheus metrics of one ragmend server (docs/metrics.md lists every series).

declared.py declares every metric once (name, help, labels and their closed sets, buckets, the
series at zero); prometheus.py is `Metrics`, the handler of the engine's and the server's events
that records them; scraped.py reads the policy's, the router's and the machine's state at scrape
time.
"""

from ragmend.server.metrics.prometheus import Metrics

__all__ = ["Metrics"]
