"""Layer 1: pagination of extracted content."""

from webfetch.paging import paginate


def test_short_content_is_one_page():
    assert paginate("hello\nworld\n", 0, 50_000, 2000) == ("hello\nworld\n", None)


def test_cut_at_a_line_boundary():
    text = "".join(f"line {i:03d}\n" for i in range(100))  # 9 characters a line
    page, nxt = paginate(text, 0, 50, 2000)
    assert page == text[:45] and nxt == 45  # 50 would split line 6
    page2, nxt2 = paginate(text, nxt, 50, 2000)
    assert page2 == text[45:90] and nxt2 == 90


def test_line_limit():
    text = "x\n" * 5000
    page, nxt = paginate(text, 0, 50_000, 2000)
    assert page.count("\n") == 2000 and nxt == 4000


def test_a_single_long_line_is_cut_where_it_must_be():
    text = "y" * 120
    assert paginate(text, 0, 50, 2000) == ("y" * 50, 50)
    assert paginate(text, 100, 50, 2000) == ("y" * 20, None)


def test_offset_past_the_end():
    assert paginate("abc", 10, 50, 2000) == ("", None)


def test_pages_cover_the_text_exactly():
    text = "".join(f"{'w' * (i % 37)}\n" for i in range(3000))
    out, offset = [], 0
    while offset is not None:
        page, offset = paginate(text, offset, 1000, 40)
        assert len(page) <= 1000 and page.count("\n") <= 40
        out.append(page)
    assert "".join(out) == text


def test_a_paragraph_longer_than_the_page_is_cut_between_words_and_the_next_page_starts_at_the_next_word():
    words = "The otters came back to the lower reaches of the river after forty years away. " * 5
    text = "# Otters\n\n" + words
    page, nxt = paginate(text, 0, 100, 2000)
    assert page == text[:nxt] == "# Otters\n\n" + words[:90]  # "…away. The otters ", not "…The otters ca"
    assert text[nxt:].startswith("came back")
    out, offset = [], 0
    while offset is not None:
        page, offset = paginate(text, offset, 100, 2000)
        assert len(page) <= 100 and (offset is None or page[-1].isspace()), page
        out.append(page)
    assert "".join(out) == text


def test_a_line_break_in_the_first_half_gives_way_to_a_word_boundary_in_the_second():
    text = "short\n" + "word " * 40
    page, nxt = paginate(text, 0, 100, 2000)
    assert nxt == 96 and page == text[:96] and page.endswith(" word ")  # not "short\n" alone


def test_any_white_space_ends_a_word_and_a_line_break_in_the_second_half_still_wins():
    text = "one\u00a0two\tthree four five six seven eight\nnine ten eleven"
    assert paginate(text, 0, 48, 2000) == ("one\u00a0two\tthree four five six seven eight\n", 40)
    assert paginate("alpha\u2003" + "b" * 30, 0, 20, 2000) == ("alpha\u2003" + "b" * 14, 20)  # no space late enough
    assert paginate("a" * 15 + "\u2003bcdef", 0, 19, 2000) == ("a" * 15 + "\u2003", 16)
