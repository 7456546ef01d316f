"""What runs in the parser worker processes (`workers.py`): HTML to markdown (`extractor.py`), PDFs
(`pdf.py`), the page flags (`flags.py`), whether a page needs Chrome (`render_need.py`), passages that match
`find` (`find.py`), links (`links.py`) and a crawl's include/exclude patterns (`crawl_patterns.py`). Pure
functions on bytes and text, and the workers that run them out of the event loop.

May import: the core (protocol, errors, urls), and the rest of parse/.
Must not import: a browser or CDP module (chrome/), fetch/, crawl/, browse/: a parser sees bytes, never a
browser or the network."""
