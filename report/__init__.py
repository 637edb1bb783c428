"""Presentation: every rich table and every plot the commands print or write."""
