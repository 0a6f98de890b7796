"""Which of the Django test modules this Python collects: Django 6 needs Python 3.12+.

Below 3.12, ``test_django.py`` cannot even be imported, so it is not
collected; ``test_django_elsewhere.py`` runs it in a Python that has Django
(``TASKFORGE_DJANGO_PYTHON``, set by ``.ci/run``). From 3.12 on it runs here,
and the runner of it elsewhere is not needed.
"""

import sys

collect_ignore = ["test_django.py"] if sys.version_info < (3, 12) else ["test_django_elsewhere.py"]
