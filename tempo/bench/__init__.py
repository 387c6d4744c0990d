"""The pipeline benchmark, `tempo bench`: ours against the released pipeline's steps on the same videos."""
