"""What the book's pages use beyond the science: the book's figure style and the exercise checkers."""
