"""Tempo measured with other fields' benchmarks: temporal grounding (`tempo eval grounding`) on
QVHighlights' and Charades-STA's files, and the synthetic world exported to them (`tempo eval export`)."""
