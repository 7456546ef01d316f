"""What the tests and the bin/ scripts (benchmarks, stress) share: the local sites and fakes they serve
(`site`, `browse_app`, `flag_pages`, `pdfs`, `fake_llm`, `scripted_browser`), the one /proc reader
(`procs`), the clients (`client`) and the daemon harnesses (`daemon`). Nothing here is a test."""
