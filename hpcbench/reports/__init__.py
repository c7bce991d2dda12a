"""Layer reports (above measure): what a results folder says to its readers. `report`
and `compare` (Markdown, HTML, figures), CSV and JSON exports, MLPerf logs, the
findings sections, and `predict`."""
