"""PDFs shaped like the real ones agents read, generated with reportlab: a two-column paper, a manual with
numbered headings and an outline, a datasheet with a specification table; and the hard cases: encrypted,
scanned (no text layer), broken, large. Each generator returns (pdf bytes, the text in reading order), the
text being the ground truth for the tests and for choosing the PDF library."""

from __future__ import annotations

import io
import random

from reportlab import platypus as rl
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.pdfgen import canvas

WORDS = ("river valley otter survey water bank reed mill family count biologist angler spring winter season "
         "study method result sample measure field station north south upstream downstream habitat growth "
         "signal noise sensor voltage current battery module register clock timer output input channel "
         "protocol packet frame latency buffer memory thread process kernel driver device firmware update "
         "network address route policy cache render extract parse token model answer section chapter table").split()

_styles = getSampleStyleSheet()
BODY = ParagraphStyle("body", parent=_styles["BodyText"], fontName="Times-Roman", fontSize=10, leading=12)
TITLE = ParagraphStyle("title", parent=_styles["Title"], fontName="Helvetica-Bold", fontSize=20, leading=24)
H1 = ParagraphStyle("h1", parent=_styles["Heading1"], fontName="Helvetica-Bold", fontSize=15, leading=18)
H2 = ParagraphStyle("h2", parent=_styles["Heading2"], fontName="Helvetica-Bold", fontSize=12, leading=14)


def sentences(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def _build(doc: rl.BaseDocTemplate, story: list) -> bytes:
    doc.build(story)
    return doc.filename.getvalue()  # type: ignore[union-attr, no-any-return]


def paper(sections: int = 6, seed: int = 1) -> tuple[bytes, str]:
    """A two-column paper: title and abstract across the page, then numbered sections in two columns."""
    rng = random.Random(seed)
    buf = io.BytesIO()
    doc = rl.BaseDocTemplate(buf, pagesize=A4, title="Otter Habitat Recovery in Restored Rivers",
                          author="A. Biologist")
    w, h = A4
    margin, gap = 2 * cm, 0.8 * cm
    col = (w - 2 * margin - gap) / 2
    head_h = 6 * cm
    first = [rl.Frame(margin, h - margin - head_h, w - 2 * margin, head_h, id="head"),
             rl.Frame(margin, margin, col, h - 2 * margin - head_h, id="c1"),
             rl.Frame(margin + col + gap, margin, col, h - 2 * margin - head_h, id="c2")]
    later = [rl.Frame(margin, margin, col, h - 2 * margin, id="l1"),
             rl.Frame(margin + col + gap, margin, col, h - 2 * margin, id="l2")]
    doc.addPageTemplates([rl.PageTemplate("first", first, onPage=_page_number, autoNextPageTemplate="later"),
                          rl.PageTemplate("later", later, onPage=_page_number)])
    truth = ["Otter Habitat Recovery in Restored Rivers"]
    abstract = "Abstract. " + sentences(rng, 5)
    truth.append(abstract)
    story: list = [rl.Paragraph(truth[0], TITLE), rl.Paragraph(abstract, BODY), rl.FrameBreak()]
    for i in range(1, sections + 1):
        heading = f"{i} " + " ".join(rng.choice(WORDS) for _ in range(3)).title()
        story.append(rl.Paragraph(heading, H2))
        truth.append(heading)
        for _ in range(3):
            para = sentences(rng, 6)
            story.append(rl.Paragraph(para, BODY))
            truth.append(para)
    return _build(doc, story), "\n\n".join(truth)


def _page_number(c: canvas.Canvas, doc: rl.BaseDocTemplate) -> None:
    c.setFont("Helvetica", 8)
    c.drawCentredString(A4[0] / 2, 1 * cm, str(doc.page))


def manual(chapters: int = 5, seed: int = 2) -> tuple[bytes, str]:
    """A multi-page manual: chapters and sections in larger bold fonts, with an outline (bookmarks)."""
    rng = random.Random(seed)
    buf = io.BytesIO()
    doc = rl.SimpleDocTemplate(buf, pagesize=A4, title="Widget Controller User Manual")
    truth = ["Widget Controller User Manual"]
    story: list = [rl.Paragraph(truth[0], TITLE)]
    for c in range(1, chapters + 1):
        chap = f"{c}. " + " ".join(rng.choice(WORDS) for _ in range(2)).title()
        story.append(_Heading(chap, H1, 0))
        truth.append(chap)
        for s in range(1, 3):
            sec = f"{c}.{s} " + " ".join(rng.choice(WORDS) for _ in range(3)).title()
            story.append(_Heading(sec, H2, 1))
            truth.append(sec)
            for _ in range(4):
                para = sentences(rng, 5)
                story.append(rl.Paragraph(para, BODY))
                truth.append(para)
    doc.build(story, onFirstPage=_page_number, onLaterPages=_page_number)
    return buf.getvalue(), "\n\n".join(truth)


class _Heading(rl.Paragraph):
    """A paragraph that also adds an outline entry (a bookmark), as manuals made by word processors do."""

    def __init__(self, text: str, style: ParagraphStyle, level: int) -> None:
        super().__init__(text, style)
        self.level = level
        self.key = f"h{id(self)}"

    def draw(self) -> None:
        super().draw()
        self.canv.bookmarkPage(self.key)
        self.canv.addOutlineEntry(self.getPlainText(), self.key, level=self.level)


def datasheet(seed: int = 3) -> tuple[bytes, str]:
    """A datasheet: title, features, an electrical characteristics table, and notes."""
    rng = random.Random(seed)
    buf = io.BytesIO()
    doc = rl.SimpleDocTemplate(buf, pagesize=A4, title="TX-42 Low-Power Sensor Interface")
    rows = [["Parameter", "Symbol", "Min", "Typ", "Max", "Unit"],
            ["Supply voltage", "VDD", "1.8", "3.3", "3.6", "V"],
            ["Supply current", "IDD", "-", "120", "180", "uA"],
            ["Clock frequency", "FCLK", "1", "16", "32", "MHz"],
            ["Operating temperature", "TA", "-40", "25", "85", "C"]]
    intro = sentences(rng, 4)
    notes = sentences(rng, 3)
    story: list = [rl.Paragraph("TX-42 Low-Power Sensor Interface", TITLE), rl.Paragraph(intro, BODY), rl.Spacer(1, 8),
                   rl.Paragraph("Electrical Characteristics", H1)]
    table = rl.Table(rows)
    table.setStyle(rl.TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
                               ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold")]))
    story += [table, rl.Spacer(1, 8), rl.Paragraph("Application Notes", H1), rl.Paragraph(notes, BODY)]
    doc.build(story)
    truth = "\n\n".join(["TX-42 Low-Power Sensor Interface", intro, "Electrical Characteristics",
                         "\n".join(" ".join(r) for r in rows), "Application Notes", notes])
    return buf.getvalue(), truth


def encrypted(password: str = "s3cret") -> bytes:
    """A PDF that needs a password to open."""
    buf = io.BytesIO()
    c = canvas.Canvas(buf, encrypt=password)
    c.drawString(72, 720, "Confidential: this text needs the password.")
    c.save()
    return buf.getvalue()


def owner_locked() -> tuple[bytes, str]:
    """Encrypted with an empty user password (only copying or printing restricted): readable by anyone."""
    from reportlab.lib.pdfencrypt import StandardEncryption
    buf = io.BytesIO()
    text = "Anyone may read this page; only printing is restricted by its owner."
    c = canvas.Canvas(buf, encrypt=StandardEncryption("", ownerPassword="owner", canPrint=0))
    c.drawString(72, 720, text)
    c.save()
    return buf.getvalue(), text


def scanned(pages: int = 2, text_first: bool = False) -> bytes:
    """Pages that are only images, as a scanner makes them: no text layer. With `text_first`, a page of
    text comes before them."""
    from PIL import Image, ImageDraw  # reportlab's own dependency
    from reportlab.lib.utils import ImageReader
    scan = Image.new("L", (300, 420), 235)
    for y in range(30, 400, 14):  # dark strokes where a scan has lines of print
        ImageDraw.Draw(scan).rectangle((20, y, 280, y + 6), fill=60)
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    if text_first:
        c.drawString(72, 720, "This first page has a text layer; the pages after it are scanned images.")
        c.showPage()
    for _ in range(pages):
        c.drawImage(ImageReader(scan), 2 * cm, 2 * cm, A4[0] - 4 * cm, A4[1] - 4 * cm)
        c.showPage()
    c.save()
    return buf.getvalue()


def broken() -> bytes:
    """Starts like a PDF, then garbage: a file damaged in transit."""
    return b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R" + bytes(range(256)) * 8


def large(chapters: int = 60) -> tuple[bytes, str]:
    """A long manual: more text than one reply holds."""
    return manual(chapters=chapters, seed=4)


def paper_interleaved(seed: int = 5) -> tuple[bytes, str]:
    """A two-column paper whose content stream runs across the columns line by line (as some typesetters
    and converters write it): text order in the file is not reading order."""
    from reportlab.lib.utils import simpleSplit
    rng = random.Random(seed)
    w, h = A4
    margin, gap = 2 * cm, 0.8 * cm
    col = (w - 2 * margin - gap) / 2
    left = [sentences(rng, 6) for _ in range(3)]
    right = [sentences(rng, 6) for _ in range(3)]
    title = "Interleaved Columns in Typeset Papers"
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    c.setTitle(title)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(margin, h - margin, title)
    lines = [simpleSplit(" ".join(side), "Times-Roman", 10, col) for side in (left, right)]
    c.setFont("Times-Roman", 10)
    y = h - margin - 40
    for i in range(max(map(len, lines))):
        for x, side in ((margin, lines[0]), (margin + col + gap, lines[1])):
            if i < len(side):
                c.drawString(x, y, side[i])
        y -= 12
    c.save()
    return buf.getvalue(), "\n\n".join([title, " ".join(left), " ".join(right)])
