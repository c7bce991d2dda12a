"""Campaigns: several testbeds x one sweep, as one command (docs/campaigns.md)."""
