"""KafkaConnection's frame reader against a real loopback server that answers in pieces:
responses split at any byte, several frames in one read, frames larger than the staging
buffer read in place, and bad frame sizes or bodies failing the connection with a clear
error instead of a hang."""

import asyncio
import random
import struct

import pytest

from kraft.protocol import ErrorCode, FrameTooLargeError, MalformedFrameError, ProtocolError
from kraft.protocol.codec import decode_request, encode_response
from kraft.protocol.connection import KafkaConnection
from kraft.raft import messages as m

SIZES = [0, 10, 60_000, 65_536, 70_000, 2 * 1024 * 1024]  # records bytes: around the 64 KiB staging buffer


def snapshot_response(size: int, seed: int) -> object:
    data = random.Random(seed).randbytes(size)
    part = m.fetch_snapshot_partition(0, ErrorCode.none, (10, 1), leader_id=1, epoch=1, size=size, position=0,
                                      records=data)
    return m.fetch_snapshot_response([(m.METADATA_TOPIC, [part])]), data


async def serve(answer) -> tuple[asyncio.Server, int]:
    """A server that reads request frames and lets `answer(correlation_id, writer)` reply."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, _ = decode_request(await reader.readexactly(size))
                await answer(header.correlation_id, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_responses_cut_at_random_bytes_arrive_whole_and_matched():
    async def main() -> None:
        rng = random.Random(7)
        expected: dict[int, bytes] = {}
        pending: list[bytes] = []

        async def answer(correlation_id: int, writer: asyncio.StreamWriter) -> None:
            size = SIZES[correlation_id % len(SIZES)]
            response, data = snapshot_response(size, correlation_id)
            expected[correlation_id] = data
            pending.append(encode_response(correlation_id, response))
            if len(pending) < 3:  # three responses back to back, in reverse order, cut anywhere
                return
            stream = b"".join(reversed(pending))
            pending.clear()
            at = 0
            while at < len(stream):
                step = rng.choice((1, 3, 4, 5, 100, 4096, 65_535, 65_536, 300_000))
                writer.write(stream[at : at + step])
                await writer.drain()
                at += step
                if rng.random() < 0.2:
                    await asyncio.sleep(0)

        server, port = await serve(answer)
        async with server:
            conn = await KafkaConnection.connect("127.0.0.1", port)
            request = m.fetch_snapshot_request(None, 2, 1, (10, 1), 0, 1 << 30)
            for _ in range(4):
                responses = await asyncio.gather(*(conn.request(request, 10) for _ in range(3)))
                for response in responses:
                    got = bytes(response.topics[0].partitions[0].unaligned_records)
                    assert got in expected.values()
            assert sorted(len(v) for v in expected.values()) == sorted(SIZES[i % len(SIZES)] for i in range(1, 13))
            conn.close()

    asyncio.run(main())


@pytest.mark.parametrize("frame, error", [
    (struct.pack(">i", 200 * 1024 * 1024), FrameTooLargeError),
    (struct.pack(">i", -5), MalformedFrameError),
    (struct.pack(">ii", 6, 1) + b"\xff\xff", ProtocolError),  # its own correlation id, then garbage
])
def test_a_bad_frame_fails_the_waiting_request_and_closes_the_connection(frame, error):
    async def main() -> None:
        async def answer(correlation_id: int, writer: asyncio.StreamWriter) -> None:
            writer.write(frame)
            await writer.drain()

        server, port = await serve(answer)
        async with server:
            conn = await KafkaConnection.connect("127.0.0.1", port, max_frame_bytes=100 * 1024 * 1024)
            with pytest.raises(error):
                await conn.request(m.describe_quorum_request(), 5)
            assert conn.closed
            with pytest.raises(ConnectionError):
                await conn.request(m.describe_quorum_request(), 5)

    asyncio.run(main())


def test_a_peer_that_closes_mid_frame_fails_the_request():
    async def main() -> None:
        async def answer(correlation_id: int, writer: asyncio.StreamWriter) -> None:
            response, _ = snapshot_response(200_000, correlation_id)
            writer.write(encode_response(correlation_id, response)[:150_000])
            await writer.drain()
            writer.close()

        server, port = await serve(answer)
        async with server:
            conn = await KafkaConnection.connect("127.0.0.1", port)
            with pytest.raises(ConnectionError):
                await conn.request(m.fetch_snapshot_request(None, 2, 1, (10, 1), 0, 1 << 30), 5)
            assert conn.closed

    asyncio.run(main())


def test_a_large_frame_buffer_is_not_reused_while_its_records_are_viewed():
    """Large frames' records are views of the frame's buffer (no copy); a buffer is taken
    for a new frame only once no view of it is left."""

    async def main() -> None:
        sent: dict[int, bytes] = {}

        async def answer(correlation_id: int, writer: asyncio.StreamWriter) -> None:
            response, data = snapshot_response(1 << 20, correlation_id)
            sent[correlation_id] = data
            writer.write(encode_response(correlation_id, response))
            await writer.drain()

        server, port = await serve(answer)
        async with server:
            conn = await KafkaConnection.connect("127.0.0.1", port)
            request = m.fetch_snapshot_request(None, 2, 1, (10, 1), 0, 1 << 30)
            kept = [(await conn.request(request, 5)).topics[0].partitions[0].unaligned_records for _ in range(4)]
            assert all(isinstance(v, memoryview) for v in kept)
            assert [bytes(v) for v in kept] == [sent[i] for i in range(1, 5)]
            kept.clear()  # the buffers are free again: the next frames reuse them
            for i in range(5, 8):
                records = (await conn.request(request, 5)).topics[0].partitions[0].unaligned_records
                assert bytes(records) == sent[i]
                del records
            conn.close()

    asyncio.run(main())
