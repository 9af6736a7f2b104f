"""``python -m fastpubsub.stats_job`` / ``spark-submit src/fastpubsub/stats_job/__main__.py``: the event statistics job."""

import sys

from fastpubsub.stats_job.statistics_job import main

sys.exit(main())
