"""The demo: the page and its API around one loaded model (`python app.py`)."""
