"""Forgetting: a person or a session removed from every store, and their voices from the audio
pipeline.
"""
