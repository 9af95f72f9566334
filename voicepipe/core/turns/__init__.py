"""Turn-taking decisions: endpointing (endpoint), agreement between partial transcripts
(partials), preemptive generation (preempt), and what the user heard of a cut reply (heard).
"""
