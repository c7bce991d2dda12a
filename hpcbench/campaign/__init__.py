"""Layer campaign (above reports): several testbeds x one sweep, as one command: plan,
forecast, book, measure, report (docs/campaigns.md)."""
