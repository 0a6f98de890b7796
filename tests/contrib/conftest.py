"""Which of the Django test modules this Python collects: Django 6 needs Python 3.12+.

Below 3.12, ``test_django.py`` and the ported Django tests (``django_port/``)
cannot even be imported, so they are not collected; ``test_django_elsewhere.py``
and ``test_django_port_elsewhere.py`` run them in a Python that has Django
(``TASKFORGE_DJANGO_PYTHON``, set by ``.ci/run``). From 3.12 on they run here,
and the runners of them elsewhere are not needed.
"""

import sys

if sys.version_info < (3, 12):
    collect_ignore = ["test_django.py", "django_port"]
else:
    collect_ignore = ["test_django_elsewhere.py", "test_django_port_elsewhere.py"]
