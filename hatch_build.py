"""Build hook: vendor the dashboard's chart library into the package (orchestrator/dashboard/
vendor.py says from where and how it is checked). Runs for wheels and editable installs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class VendorChartLibrary(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        path = Path(self.root) / "orchestrator" / "dashboard" / "vendor.py"
        spec = importlib.util.spec_from_file_location("matrix_bench_vendor", path)
        assert spec is not None and spec.loader is not None
        vendor = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(vendor)
        vendor.fetch()
