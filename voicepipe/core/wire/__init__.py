"""What crosses the wire, sans-I/O: the /ws protocol and its session rules, admission of
sessions and requests, and the OpenAI chat-completions request/response shapes.
"""
