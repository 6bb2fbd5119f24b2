import pytest

from tests.spark.kafka_logs import kafka_log
from tests.spark.logs import metadata_log, record_log


@pytest.fixture(scope="session")
def spark():
    """One local[2] session for every Spark test in this process: it takes seconds to
    start. kraft.spark.session() points the Python workers at this interpreter itself."""
    import kraft.spark

    session = kraft.spark.session("kraft-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def records(tmp_path_factory):
    """A multi-segment log of data and control batches (read-only for the tests)."""
    return record_log(tmp_path_factory.mktemp("records"))


@pytest.fixture(scope="session")
def metadata(tmp_path_factory):
    """A metadata log with a snapshot in the middle (read-only for the tests)."""
    return metadata_log(tmp_path_factory.mktemp("metadata"))


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """A Kafka-shaped metadata.log.dir: every record type, transactions, a snapshot (read-only)."""
    return kafka_log(tmp_path_factory.mktemp("kafka") / "metadata")


@pytest.fixture(scope="session")
def kafka_unknown(tmp_path_factory):
    """The same log ending with values kraft cannot decode (read-only)."""
    return kafka_log(tmp_path_factory.mktemp("kafka-unknown") / "metadata", unknown=True)
