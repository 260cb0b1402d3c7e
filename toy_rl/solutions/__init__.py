"""Reference solutions to the notebook exercises (for instructors; students: try first!).

One module per notebook. Each answer is written the way a learner would write
it, short and explicit; ``tests/test_exercises.py`` pins every one to the
library code it mirrors (``toy_rl.advantages``, ``toy_rl.clipping``,
``toy_rl.bandit``), so the two cannot drift apart. The checker in
:mod:`toy_rl.exercises` runs these but never prints them; a notebook loads
them only when its parameter ``SOLUTIONS = True``.
"""
