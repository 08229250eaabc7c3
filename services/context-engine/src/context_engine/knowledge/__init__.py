"""What is known: entities and their mentions, the facts about a query's subjects, profiles and
the graph view, speakers.
"""
