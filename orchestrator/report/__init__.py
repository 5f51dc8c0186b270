"""From records to what a person reads: derived columns, judgement against physics, tables,
figures, comparisons."""
