"""moto 5.2.5's gaps, filled for forge's tests, and the Google Cloud APIs it lacks (gcp*.py,
compute_filter.py, served by harness.py): one module per topic, whose docstring lists the gaps
it fills or what it emulates. Importing a module applies its patches to moto's classes (never to
the installed files); tests/moto/launcher.py imports them in order, since later patches build
on earlier ones.

Importing the package first sets the environment moto reads (before any module imports moto):
  * AWS-managed IAM policies (MOTO_IAM_LOAD_MANAGED_POLICIES);
  * no MOTO_ACCOUNT_ID, which would override the account the middleware gives each request
    (harness.py).
"""

import os

os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
os.environ.pop("MOTO_ACCOUNT_ID", None)
