"""Everything a run looks like to people: the page's timeline figures, the paper's allocation figures, the offline
HTML report and filmstrip, progress and stats, exports, in one style."""
