"""A Kafka error code as Kafka's admin client turns it into an exception, so that a tool's
error line reads as the line of Kafka's tool: the exception's class (in
org.apache.kafka.common.errors) and its message, the server's error message when the answer
has one, else the error's default message (Kafka's Errors enum; these are the codes the
admin tools meet). A code not listed is named after its enum name, as Kafka names them."""

from kio.schema.errors import ErrorCode

PACKAGE = "org.apache.kafka.common.errors"

# code: (exception class, default message)
KAFKA_ERRORS: dict[int, tuple[str, str]] = {
    -1: ("UnknownServerException", "The server experienced an unexpected error when processing the request."),
    1: ("OffsetOutOfRangeException", "The requested offset is not within the range of offsets maintained by the "
                                     "server."),
    3: ("UnknownTopicOrPartitionException", "This server does not host this topic-partition."),
    5: ("LeaderNotAvailableException", "There is no leader for this topic-partition as we are in the middle of a "
                                       "leadership election."),
    7: ("TimeoutException", "The request timed out."),
    14: ("CoordinatorLoadInProgressException", "The coordinator is loading and hence can't process requests."),
    15: ("CoordinatorNotAvailableException", "The coordinator is not available."),
    16: ("NotCoordinatorException", "This is not the correct coordinator."),
    17: ("InvalidTopicException", "The request attempted to perform an operation on an invalid topic."),
    22: ("IllegalGenerationException", "Specified group generation id is not valid."),
    24: ("InvalidGroupIdException", "The configured groupId is invalid."),
    25: ("UnknownMemberIdException", "The coordinator is not aware of this member."),
    27: ("RebalanceInProgressException", "The group is rebalancing, so a rejoin is needed."),
    29: ("TopicAuthorizationException", "Topic authorization failed."),
    30: ("GroupAuthorizationException", "Group authorization failed."),
    31: ("ClusterAuthorizationException", "Cluster authorization failed."),
    35: ("UnsupportedVersionException", "The version of API is not supported."),
    36: ("TopicExistsException", "Topic with this name already exists."),
    37: ("InvalidPartitionsException", "Number of partitions is below 1."),
    38: ("InvalidReplicationFactorException", "Replication factor is below 1 or larger than the number of available "
                                              "brokers."),
    39: ("InvalidReplicaAssignmentException", "Replica assignment is invalid."),
    40: ("InvalidConfigurationException", "Configuration is invalid."),
    41: ("NotControllerException", "This is not the correct controller for this cluster."),
    42: ("InvalidRequestException", "This most likely occurs because of a request being malformed by the client "
                                    "library or the message was sent to an incompatible broker. See the broker logs "
                                    "for more details."),
    44: ("PolicyViolationException", "Request parameters do not satisfy the configured policy."),
    54: ("SecurityDisabledException", "Security features are disabled."),
    58: ("SaslAuthenticationException", "SASL Authentication failed."),
    67: ("InvalidPrincipalTypeException", "Supplied principalType is not supported."),
    68: ("GroupNotEmptyException", "The group is not empty."),
    69: ("GroupIdNotFoundException", "The group id does not exist."),
    73: ("TopicDeletionDisabledException", "Topic deletion is disabled."),
    74: ("FencedLeaderEpochException", "The leader epoch in the request is older than the epoch on the broker."),
    86: ("GroupSubscribedToTopicException", "Deleting offsets of a topic is forbidden while the consumer group is "
                                            "actively subscribed to it."),
    91: ("ResourceNotFoundException", "A request illegally referred to a resource that does not exist."),
    92: ("DuplicateResourceException", "A request illegally referred to the same resource twice."),
    93: ("UnacceptableCredentialException", "Requested credential would not meet criteria for acceptability."),
    100: ("UnknownTopicIdException", "This server does not host this topic ID."),
    102: ("BrokerIdNotRegisteredException", "The given broker ID was not registered."),
}


class KafkaError(Exception):
    """An error answer, as Kafka's admin client raises it."""

    def __init__(self, error: ErrorCode | int, message: str | None = None) -> None:
        self.error = ErrorCode(int(error))
        known = KAFKA_ERRORS.get(int(error))
        self.exception = known[0] if known else _camel(self.error.name) + "Exception"
        self.message = message or (known[1] if known else self.error.name.upper())
        super().__init__(self.message)

    def java(self) -> str:
        """The exception as Java prints it (Throwable.toString): its class, then its message."""
        return f"{PACKAGE}.{self.exception}: {self.message}"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def check(error: ErrorCode | int, message: str | None = None) -> None:
    """KafkaError unless `error` is NONE."""
    if int(error) != 0:
        raise KafkaError(error, message)
