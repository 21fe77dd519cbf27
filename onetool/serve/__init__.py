"""The gateway's faces and the transports that carry them: one module per face, route or transport."""
