"""NCCL's RAS client protocol (ras_protocol.py, written from NCCL's source) against the
model of RAS in tests/ras_model for every NCCL it models, and against a real NCCL's RAS
socket when GPUDIAG_RAS_REAL=HOST:PORT names one (scripts/ras-real-nccl.sh starts 4 ranks
of a real NCCL on a GPU machine and sets it); without it that class skips, saying so."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ras_model"))
import ras_protocol  # noqa: E402
import ras_scenarios  # noqa: E402
from ras_server import RasModel  # noqa: E402

VERSIONS = ("2.24.3", "2.26.6", "2.28.3", "2.28.9", "2.30.7")


class ModelSpeaksTheProtocol(unittest.TestCase):
    def test_every_version(self):
        for v in VERSIONS:
            with self.subTest(version=v), RasModel(ras_scenarios.behind(v)) as ras:
                ras_protocol.check_protocol(self, ras.host, ras.port, v)
                self.assertEqual(ras_protocol.version_of(ras.host, ras.port), v)
                ras_protocol.check_long_line(self, ras.host, ras.port)

    def test_json_from_2_28_7(self):
        for v in ("2.28.9", "2.30.7"):
            with self.subTest(version=v), RasModel(ras_scenarios.silent(v)) as ras:
                text = ras_protocol.check_json(self, ras.host, ras.port, v)
                # 2.28's missing comma after a missing rank's nvml_dev (jsonWriteMissingRank).
                self.assertEqual('"nvml_dev": 2\n' in text, v == "2.28.9")


@unittest.skipUnless(os.environ.get("GPUDIAG_RAS_REAL"),
                     "no real NCCL here: GPUDIAG_RAS_REAL=HOST:PORT names the RAS socket of a running "
                     "NCCL job (scripts/ras-real-nccl.sh on a GPU machine starts one)")
class RealNcclSpeaksTheProtocol(unittest.TestCase):
    def setUp(self):
        host, _, port = os.environ["GPUDIAG_RAS_REAL"].rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        ras_protocol.wait_listening(self.host, self.port)
        self.version = ras_protocol.version_of(self.host, self.port)

    def test_protocol(self):
        ras_protocol.check_protocol(self, self.host, self.port, self.version)

    def test_json(self):
        ras_protocol.check_json(self, self.host, self.port, self.version)

    def test_long_line(self):
        ras_protocol.check_long_line(self, self.host, self.port)


if __name__ == "__main__":
    unittest.main()
