"""Model lifecycle, below the HTTP layer: what can be served (specs.py, checks.py), what one loaded model is
(bundle.py: its engine, template, parsers and the pipeline's services; the APIs' own services are added by the
composition root), the manager that loads them when a request names one, keeps leases while requests run and
unloads the idle ones (manager.py), and whether they can take work (readiness.py). Imports neither HTTP nor an API."""
