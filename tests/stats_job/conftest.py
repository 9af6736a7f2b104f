"""The Spark statistics job, on local Spark and on a standalone cluster: the spark lane."""

from tests.support.lanes import lane

pytest_itemcollected = lane("spark")
