"""Studies built on the solver: SOPHIA-style reconfiguration planning and the ENDURE robustness benchmark."""
