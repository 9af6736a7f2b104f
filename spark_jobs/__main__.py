"""``python -m spark_jobs`` / ``spark-submit spark_jobs/__main__.py``: the event statistics job."""

import sys

from spark_jobs.statistics_job import main

sys.exit(main())
