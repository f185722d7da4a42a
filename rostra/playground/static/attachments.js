// Images attached to the next message: picked with the file picker, pasted into the message box or dropped
// on the composer. Each is read as a data URL (sent as an `input_image` part: the page never uploads
// anywhere else, and the page's CSP allows data: images) and shown as a removable thumbnail until sent.

// Under rostra's default 16 MiB request body once base64 has grown it by a third, with room for the text.
export const MAX_IMAGE_BYTES = 8 * 1024 * 1024;

export class Attachments {
  constructor(tray, onProblem) {
    this.tray = tray; // the element the thumbnails are drawn in
    this.onProblem = onProblem; // called with a message for a file that cannot be attached
    this.images = []; // {name, url}
  }

  get count() { return this.images.length; }

  // Files from the picker, a paste or a drop: images are read, anything else is named in a message.
  async add(files) {
    const problems = [];
    for (const file of files) {
      if (!file.type.startsWith("image/")) {
        problems.push(`${file.name || "The pasted item"} is not an image (${file.type || "unknown type"})`);
      } else if (file.size > MAX_IMAGE_BYTES) {
        problems.push(`${file.name || "The pasted image"} is too large (${mebibytes(file.size)} MiB; ` +
                      `at most ${mebibytes(MAX_IMAGE_BYTES)} MiB an image)`);
      } else {
        this.images.push({ name: file.name || "pasted image", url: await readAsDataUrl(file) });
      }
    }
    this.onProblem(problems.join(". "));
    this.render();
  }

  // The images as Responses `input_image` parts, and the tray emptied for the next message.
  take() {
    const parts = this.peek();
    this.images = [];
    this.render();
    return parts;
  }

  // The parts the next message would carry, left attached ("Show request" before sending).
  peek() {
    return this.images.map((image) => ({ type: "input_image", image_url: image.url }));
  }

  // Put parts back (the turn could not be sent).
  restore(parts) {
    this.images = parts.map((part) => ({ name: "image", url: part.image_url }));
    this.render();
  }

  render() {
    this.tray.replaceChildren(...this.images.map((image, index) => this.thumbnail(image, index)));
    this.tray.hidden = this.images.length === 0;
  }

  thumbnail(image, index) {
    const item = document.createElement("div");
    item.className = "attachment";
    const img = document.createElement("img");
    img.src = image.url;
    img.alt = image.name;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "icon-button attachment-remove";
    remove.textContent = "×";
    remove.setAttribute("aria-label", `Remove ${image.name}`);
    remove.title = `Remove ${image.name}`;
    remove.addEventListener("click", () => {
      this.images.splice(index, 1);
      this.render();
      document.getElementById("prompt").focus();
    });
    item.append(img, remove);
    return item;
  }
}

function mebibytes(bytes) {
  return (bytes / 1024 / 1024).toFixed(1);
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

// The images of a stored or sent message's content (the `input_image` parts that carry a URL).
export function imageUrls(content) {
  if (!Array.isArray(content)) return [];
  return content.filter((part) => part.type === "input_image" && part.image_url).map((part) => part.image_url);
}
