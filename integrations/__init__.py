"""What other systems use ragmend through: clients of its HTTP API for their own stacks
(llama_index.py: ragmend's diagnosis as a llama-index evaluator). They speak HTTP only and import
no other part, so a user's process needs none of ragmend's models."""
