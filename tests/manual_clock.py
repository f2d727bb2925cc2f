"""A clock a test moves by hand, for code that takes `clock=time.monotonic`."""


class ManualClock:
    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now
