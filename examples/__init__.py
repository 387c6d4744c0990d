"""The shipped examples: `python -m examples.make_examples` renders them, `python -m examples.check_examples` grades
them."""
