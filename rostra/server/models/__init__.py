"""Many models in one server: what can be served (specs.py), what one loaded model is (bundle.py), and the
manager that loads them when a request names one, keeps leases while requests run, and unloads the idle
ones (manager.py)."""
