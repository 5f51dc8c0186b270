"""`matrix dashboard -o DIR`: a static site over the results store (docs/dashboard.md).

Pages need no server and no network: each carries its rows as JSON, and one script
(assets/site.js) draws its sortable, filterable tables and its charts with the vendored
Chart.js (vendor.py). data.py reads the store, pages.py writes the site.
"""
