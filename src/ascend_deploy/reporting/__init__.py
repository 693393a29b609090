"""Files written for operators and monitoring (Prometheus file_sd targets)."""
