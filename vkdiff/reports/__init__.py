"""HTML reports from the results store: one page per device, a cross-device page, an index."""

from vkdiff.reports.model import REPORT_COLUMNS, Expectation, Merged, Row
from vkdiff.reports.render import ReportIndex, render_reports, render_results

__all__ = ["REPORT_COLUMNS", "Expectation", "Merged", "ReportIndex", "Row", "render_reports", "render_results"]
