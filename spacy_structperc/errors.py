"""Coded errors and warnings. Each message names the problem and what to do about it."""
import warnings


class ErrorsWithCodes(type):
    def __getattribute__(self, code):
        msg = super().__getattribute__(code)
        if code.startswith("__"):
            return msg
        return f"[{code}] {msg}"


class Errors(metaclass=ErrorsWithCodes):
    S001 = ("Component '{name}' is not initialized: it has no labels or weights yet. "
            "Call nlp.initialize() before using or training it, or load a trained pipeline.")
    S002 = ("Component '{name}' found no labels in the training data (attribute '{attr}'). Check that "
            "the corpus carries the annotation, or pass labels to initialize (spacy init labels).")
    S003 = "Labels must be strings; got {value!r} of type {type}."
    S004 = ("Gold label '{label}' is not one of the labels of component '{name}'. Add it with "
            "add_label() before training, or re-run initialize on data that contains it.")
    S005 = ("Component '{name}' got an empty training set: get_examples() returned no Example "
            "objects. Check the paths in [paths] / [corpora].")
    S006 = ("Could not load the weights of component '{name}': {reason}. The file is corrupt or was "
            "not written by spacy-structperc; retrain or restore it from a good copy.")
    S007 = ("The weights of component '{name}' were saved in format version {found}, but this "
            "spacy-structperc reads versions up to {supported}. Upgrade spacy-structperc to load them.")
    S008 = "Unknown {setting} {value!r} for component '{name}'; expected one of {options}."
    S009 = ("The Doc has no '{attr}' annotation, which feature atom '{atom}' of component '{name}' "
            "needs. Add a component that sets it earlier in the pipeline, or use a feature set "
            "without it.")
    S010 = ("'{label}' is not a Universal POS tag, so component '{name}' (attr = \"pos\") cannot "
            "write it to token.pos_. Use attr = \"tag\" for language-specific tags.")
    S011 = ("The feature templates of component '{name}' read {history} previous labels, but the "
            "decoder '{decoder}' with order {order} can only use {order}. Raise the order or "
            "choose a feature set with a shorter history.")
    S012 = "Setting '{setting}' of component '{name}' must be {requirement}; got {value!r}."
    S013 = "Unknown feature atom '{atom}'. Known atoms: {known}."
    S014 = ("The feature templates of component '{name}' use {what}, which are read from "
            "spacy-lookups-data at initialization, but it could not be loaded for language "
            "'{lang}' ({reason}). Install it with `pip install spacy-lookups-data`, or use a "
            "feature set with {setting} = false.")
    S015 = ("{path}, line {line}: expected 'word POS chunk' (three fields separated by "
            "whitespace, chunk tag O, B-TYPE or I-TYPE), got {text!r}. Fix or remove the line.")
    S016 = "Unknown part {part!r} of the CoNLL-2000 reader; expected one of {options}."
    S017 = "heldout must be an integer >= 0; got {value!r}."
    S018 = "The CoNLL-2000 reader has no path; set it in [paths] (e.g. --paths.train)."
    # S019-S029: structperc_tagger's universal POS (the `pos` setting).
    S019 = ("Setting 'pos' of component '{name}' must be \"map\" (each fine tag's most frequent "
            "universal POS in the training data) or \"predict\" (a second pass predicts it among "
            "the universal POS the tag was seen with); got {value!r}. It applies with attr = \"tag\".")
    # NER corpus readers and conversion (S030-S039), synthetic latent data (S040-S049)
    S020 = ("{where} has no template named {names}, so it cannot leave them out; its templates "
            "are: {known}.")
    S030 = ("{path}, line {line}: expected 'word POS chunk NER' (four fields separated by "
            "whitespace, NER tag O, B-TYPE or I-TYPE), got {text!r}. Fix or remove the line.")
    S031 = ("{path}, line {line}: expected 'token<TAB>tag' (or whitespace-separated fields with "
            "the tag O, B-TYPE or I-TYPE last, {n} field(s) on every line of the file), got "
            "{text!r}. Fix or remove the line.")
    S032 = "Unknown {setting} {value!r} of the {reader} reader; expected one of {options}."
    S033 = "The {reader} reader has no path; set it in [paths] (e.g. --paths.train)."
    S034 = ("{path}: no such file ({reader} reader). Check the path, or set $STRUCTPERC_DATA / "
            "the project's data_dir to the folder of corpora.")
    S035 = ("{path}: no sentences found ({reader} reader). The file is empty or holds only "
            "document headers; check that it is the right file.")
    S036 = "{setting} of the {reader} reader must be an integer >= 0; got {value!r}."
    # S210-S219: reading corpus files (shared by every reader).
    S210 = ("{path}: not a .spacy file the {reader} reader can read ({reason}). The file is empty, "
            "cut short or of another format; convert the corpus again (python -m "
            "spacy_structperc.convert) or check that it is the right file.")
    S040 = "Synthetic data: {setting} must be {requirement}; got {value!r}."
    S041 = ("Synthetic data: to_arrays needs sequences of one length to stack them; got lengths "
            "{lengths}. Generate them with one `length`, or use the sequences one by one.")
    # S050-S059: installation.
    S050 = ("spacy-structperc's compiled core ({module}) is missing: this checkout was never built, "
            "or was built for another Python. Build it from the repository root with "
            "`python -m pip install -e .` (or `python setup.py build_ext --inplace`); a C compiler "
            "and the Python headers are needed.")
    # S100-S119: structperc_parser.
    S100 = ("The gold parse of a training example for component '{name}' has a cycle (tokens "
            "{tokens}: {words}). A dependency tree must lead from every token to a root; fix the "
            "heads in the corpus, or drop the example.")
    S101 = ("Gold dependency label '{label}' is not one of the labels of component '{name}', and "
            "there is no 'dep' label to back it off to. Re-run initialize on data that contains "
            "it, or pass a label set that includes it (spacy init labels).")
    S102 = ("Component '{name}' got labels to initialize with that include the reserved root "
            "label '{label}'. The root is not an arc label: leave it out of the label list.")

    # S120-S159: reliability (threads, missing gold, model-file integrity, readers).
    S120 = ("The model file of component '{name}' is damaged: its checksum does not match its "
            "contents (a truncated copy, a failed download or a disk error). Restore it from a "
            "good copy or retrain; the component was left as it was.")
    S121 = ("The model file of component '{name}' says it is format version 2 or later but has no "
            "checksum at its end, so it was cut short or damaged. Restore it from a good copy or "
            "retrain; the component was left as it was.")
    S122 = ("The model file of component '{name}' holds {n} weight(s) that are NaN or infinite, "
            "which would make every prediction meaningless. Restore it from a good copy or "
            "retrain; the component was left as it was.")
    S123 = ("Could not load component '{name}' from {path}: {reason}. The component was left as "
            "it was; check the path (a directory written by to_disk / nlp.to_disk).")
    S124 = ("Gold entities of a training example for component '{name}' are not valid IOB "
            "(token {i} {text!r} has ent_iob {iob!r} after {prev!r}: I-X must continue an entity "
            "of type X). Fix the reference Doc (doc.ents or doc.set_ents set valid ones), or drop "
            "the example; example text: {example!r}.")
    S125 = ("{path}: the file is not valid UTF-8 (line {line}, byte {byte} of the file: {bad!r}) "
            "({reader} reader). Convert it, e.g. `iconv -f latin1 -t utf-8`, or re-export it "
            "as UTF-8.")
    S126 = ("The model file of component '{name}' is in format version {found}, which this "
            "spacy-structperc no longer reads (it reads versions {oldest} to {supported}). Retrain "
            "the component, or load and re-save it with the release that wrote it.")
    S127 = ("Component '{name}' has weights beyond the range of precision '{precision}' "
            "({reason}). Set the model's precision to \"int8\" or \"float32\" in [components.{name}.model].")
    S128 = ("The saved {what} of component '{name}' is empty (0 bytes). spacy-structperc never "
            "writes an empty file or entry (a component that learned nothing still saves its "
            "header and checksum), so this is a copy cut short, a failed download or a disk "
            "error. Restore it from a good copy or retrain; the component was left as it was.")
    S129 = ("The saved data of component '{name}' has no '{key}' entry, so loading it would keep "
            "this component's current {key} under the saved others. Restore the data from a good "
            "copy (to_bytes writes every entry), or pass exclude=[\"{key}\"] to load the rest on "
            "purpose; the component was left as it was.")

    # S200-S239: structperc_clauses (FR-Perceptron clause identifier, CoNLL-2001 reader, UD rule).
    S200 = ("{path}, line {line}: expected 'word POS [chunk ...] clause' (at least two "
            "whitespace-separated fields, the clause tag last, of the form (S(S*, * or *S)S)), got "
            "{text!r}. Fix or remove the line.")
    S201 = ("{path}, line {line}: unbalanced clause brackets: {problem}. Every (S must be closed by "
            "an S) in the same sentence; fix the clause column of the sentence.")
    S202 = "The {reader} reader has no path; set it in [paths] (e.g. --paths.train)."
    S203 = ("Component '{name}' needs part-of-speech tags (token.tag_), and a Doc has none. Put a "
            "tagger before it in the pipeline (e.g. structperc_tagger), or give it tagged Docs.")
    S204 = ("Component '{name}' found no clauses in doc.spans['{key}'] of the training examples. "
            "Check that the corpus carries clause annotation under that key (the CoNLL-2001 and UD "
            "clause readers write doc.spans['clauses']), or set spans_key to match it.")
    S205 = ("{path}, line {line}: expected a CoNLL-U token line (10 tab-separated fields, ID and "
            "HEAD integers), got {text!r}. Fix or remove the line.")
    S206 = ("{path}: sentence ending at line {line} is not a tree: {problem}. Fix the HEAD column "
            "(every word must lead to the root, with exactly one root).")
    S207 = ("Unknown function form {value!r} for the clause model of component '{name}'; expected "
            "one of {options}. 'primal' is the averaged perceptron, 'dual' the voted kernel "
            "perceptron (spacy_structperc._core.kernel).")
    S208 = ("Component '{name}' was asked for the dual (kernel) form, but this installation has no "
            "kernel perceptron (spacy_structperc._core.kernel): {reason}. Use form = \"primal\".")

    # S240-S279: k-best reranking.
    S240 = ("Unknown reranking learner '{learner}'. Set the reranker block's learner to one of "
            "{options}.")
    S241 = ("The '{learner}' reranker needs scikit-learn and scipy, which are not installed. "
            "Install them with `pip install scikit-learn scipy` (from a checkout: `pip install -e "
            "\".[rerank]\"`), or choose the learner "
            "'perceptron', 'boosting' or 'dual'.")
    S242 = ("Unknown reranking kernel '{kernel}'. Set the reranker block's kernel to one of "
            "{options}.")
    S243 = ("The tree kernel needs each candidate's tree (heads and node labels), and these "
            "candidate lists have none. Build them with trees (CandidateLists.build with 'heads' "
            "and 'nodes'), or use the kernel 'linear' or 'poly'.")
    S244 = ("Component '{name}': setting '{setting}' of the reranker block must be "
            "{requirement}; got {value!r}.")
    S245 = ("Component '{name}' has a reranker block, which reranks the beam's k-best list: set "
            "decoder = \"beam\" (it is '{decoder}').")
    S246 = ("Component '{name}': the saved reranker was trained on global features of version "
            "{found}, and this spacy-structperc extracts version {expected}, whose keys mean other "
            "features. Retrain the reranker (spacy train with the reranker block), or load the "
            "pipeline with exclude=[\"{name}\"] and add a parser without one.")
    S247 = ("Unknown normalization '{norm}' of the base score in a reranker. Set the reranker "
            "block's settings.base_norm to one of {options}.")
    S248 = ("The reranker of component '{name}' is damaged: its saved bytes do not match their "
            "checksum or are not a reranker (a truncated copy, a failed download or a disk error). "
            "Restore the pipeline from a good copy or retrain; the component was left as it was.")
    S249 = ("Component '{name}' has a reranker block, but the saved data has no reranker {what}. "
            "Restore the whole saved pipeline (to_disk writes it next to 'cfg' and 'model'), or "
            "remove the reranker block; the component was left as it was.")

    S250 = ("A TreeScorer needs a structperc_parser component, and the pipeline has none "
            "(its components: {names}). Give a pipeline with one, or name it with parser=.")
    S251 = ("Component '{name}' has no reranker block, so there is no reranker to configure. "
            "Train the parser with a [components.{name}.reranker] block.")
    S252 = ("Component '{name}': '{setting}' of the reranker block is a training setting, fixed "
            "when the reranker was trained; configure_reranker changes only {allowed}. Retrain "
            "with the new setting instead.")
    S253 = ("Component '{name}': the reranker has no trained {model} model, so {setting} must "
            "stay 0 (it was 0 when the parser was trained). Retrain with {setting} > 0 for one.")
    S254 = ("The reranker {what} of component '{name}' is empty (0 bytes). A reranker that is not "
            "fitted is saved as an explicit, checksummed empty record, never as nothing, so this "
            "is a copy cut short or a disk error (or a file of an earlier release saved before "
            "the reranker was ever fitted: re-save it with the release that wrote it). Restore "
            "it from a good copy or retrain; the component was left as it was.")

    # S280-S299: the dual-form kernel perceptron (_core/kernel).
    S280 = ("Could not load the kernel perceptron: {reason}. The bytes are damaged or were not "
            "written by DualPerceptron.to_bytes(); retrain it or restore it from a good copy.")
    S281 = ("The kernel perceptron was saved in format version {found}, but this spacy-structperc "
            "reads versions up to {supported}. Upgrade spacy-structperc to load it.")
    S282 = ("The kernel perceptron was saved with the kernel class '{cls}', which is not registered. "
            "Import the module that defines it (it calls register_kernel) before loading; "
            "registered kernels: {known}.")
    S283 = "Setting '{setting}' of the kernel perceptron must be {requirement}; got {value!r}."
    S284 = ("A sparse item for {kernel} must be an array of integer keys, or a tuple (keys, "
            "values) of two 1-d arrays of one length; {problem}.")
    S285 = ("Kernel class '{cls}' does not implement pair(x, y). A kernel subclass must override "
            "pair(), or row() and store_item() (see spacy_structperc/_core/kernel.pyx).")
    S286 = ("The kernel given to DualPerceptron already holds {n} support items. Give each "
            "DualPerceptron a kernel of its own, with no support items.")

    # S300-S339: pipeline contracts (requires/assigns, missing inputs, optional extras).
    S300 = ("Component '{name}' ({factory}) reads {attr} ({why}), but the Doc has no {ATTR} "
            "annotation: no component before '{name}' in the pipeline sets it. {fix}")
    S301 = ("Component '{name}' ({factory}) has no {method}: {why}")
    S302 = ("Component '{name}' uses {what} from spacy-lookups-data, which is not installed "
            "({reason}). Install it with `pip install spacy-lookups-data` (from a checkout: "
            "`pip install -e \".[lookups]\"`), or train it with a feature set without them "
            "({setting}). A trained pipeline never needs the extra: the tables are saved in it.")
    S303 = ("Component '{name}' got predictions for {n_predicted} tokens to write to Docs of {n_tokens} "
            "tokens: set_annotations takes the Docs that predict was given, with its output.")
    # S304-S307: writing a batch's annotations to its Docs in one call (spacy_structperc/docarrays.py).
    S304 = ("Doc {doc} of the batch: the head of token {index} is out of range (relative head "
            "{rel_head_index}, value {value}, in a Doc of {length} tokens). Heads are relative to "
            "the token, as in Doc.from_array; no Doc of the batch was written.")
    S305 = ("Doc {doc} of the batch: token {index} has ENT_IOB value {value}, which is not an index "
            "into {values} (as Doc.from_array requires); no Doc of the batch was written.")
    S306 = ("Doc {doc} of the batch has {doc_length} tokens but rows {start}:{end} ({array_length}) "
            "were given for it (offsets must be the Docs' cumulative lengths, starting at 0, and "
            "end at the {n_rows} rows of the values); no Doc of the batch was written.")
    S307 = ("Writing a batch of Docs: {problem}.")

    # S340-S379: distributed training and annotation (Dask).
    S340 = ("`{command}` needs Dask (dask.distributed), which is not installed. Install the "
            "optional extra: `pip install \"dask[distributed]\"` (from a checkout: `pip install -e "
            "\".[dask]\"`).")
    S341 = ("Component '{name}' ({kind}) is trainable but is not a structured-perceptron component, "
            "so its weights cannot be mixed by train-distributed. Add it to [training] "
            "frozen_components, or train it with spacy train.")
    S342 = ("train-distributed found no structured-perceptron component to train in the pipeline "
            "{pipeline} (frozen: {frozen}). Add one to the config, or unfreeze it.")
    S343 = ("train-distributed cannot cut {n_examples} training example(s) into {n_shards} shards: "
            "every shard needs at least one. Use fewer shards (--shards, --workers) or more data.")
    S344 = ("A worker could not read the training shard '{url}' ({reason}). Shards must be at a "
            "path every worker can reach: pass --shard-dir with a shared folder or an fsspec URL.")
    S345 = "Unknown mixing '{value}' for train-distributed: expected one of {options}."
    S346 = ("train-distributed needs a positive number of epochs; got {value}. Set [training] "
            "max_epochs in the config or pass --epochs.")
    S347 = ("annotate found no input in '{input}': give a folder, a file or a glob of .txt, "
            ".jsonl or .spacy files.")
    S348 = ("annotate cannot read '{path}': {reason}. Inputs are .txt (one record per line), .jsonl "
            "(one object with a \"text\" field per line) or .spacy (DocBin) files.")
    S349 = ("The output folder '{output}' holds partitions of a different annotate run ({field}: "
            "{found!r}, now {expected!r}). Resume with the same inputs and --partition-size, or "
            "write to a new folder.")
    # S350-S369: Dask clusters and faults.
    S350 = ("`{command}` could not start its local Dask cluster of {n_workers} worker process(es) "
            "in {attempts} attempt(s): {reason}. Check the machine's memory and process limits, "
            "or pass --workers with fewer workers.")
    S351 = ("`{command}` found no Dask worker on {cluster} within {timeout:.0f} s. Start workers "
            "for the scheduler, or raise --worker-timeout.")
    S352 = ("train-distributed stopped in epoch {epoch}: {reason}. The mix of the last completed "
            "epoch ({done}) is saved in '{checkpoint}'; run the same command again with --resume "
            "to continue from it (the model is the one an undisturbed run makes).")
    S353 = ("train-distributed cannot resume from '{checkpoint}': {reason}. Resume with the "
            "config, overrides, --shards and --mixing of the stopped run, or start a new run "
            "without --resume.")
    S354 = ("train-distributed on a cluster given by address (--scheduler) needs --shards N: the "
            "number of shards decides the model, so it cannot be the number of workers that "
            "happen to be connected at the start.")
    S355 = ("train-distributed needs a positive whole number of shards; got {value!r}.")

    # S310-S319: saved-pipeline integrity (the settings file of a component).
    S310 = ("The settings file (cfg) of component '{name}' is damaged: its checksum does not match "
            "its contents (a truncated copy, a failed download, a disk error or a hand edit). "
            "Restore it from a good copy or retrain; the component was left as it was.")
    S311 = ("The settings (cfg) of component '{name}' cannot be loaded: {reason}. The file is "
            "damaged or was written by another version of spacy-structperc; restore it from a "
            "good copy or retrain. The component was left as it was.")


    # S400-S419: NER gazetteers and two-stage prediction (spacy_structperc/ner/).
    S400 = ("The gazetteer block of component '{name}' is damaged: its checksum does not match its "
            "contents (a truncated copy, a failed download, a disk error or a hand edit). Restore "
            "it from a good copy or retrain; the component was left as it was.")
    S401 = ("The gazetteer block of component '{name}' cannot be loaded: {reason}. It is damaged "
            "or was not written by spacy-structperc; restore it from a good copy or retrain. The "
            "component was left as it was.")
    S402 = ("The gazetteer block of component '{name}' is in format version {found}, but this "
            "spacy-structperc reads versions up to {supported}. Upgrade spacy-structperc to load it.")
    S403 = ("Unknown gazetteer source {source!r} for component '{name}'; expected some of "
            "{options} (\"train\": name lists mined from the training data).")
    S404 = ("Component '{name}' uses the gazetteer source '{source}', which needs the Python "
            "package '{package}' at initialization ({reason}). Install the optional extra: "
            "`pip install -e \".[gazetteers]\"` from the checkout, or remove '{source}' from "
            "components.{name}.gazetteers. A trained model carries its lists and needs neither.")
    S406 = ("Component '{name}' has {n} entity types and two_stage = true; the two-stage atoms "
            "hold the types of a word's other occurrences as a set of at most 62. Set "
            "components.{name}.two_stage = false, or merge types.")
    S405 = ("The saved model of component '{name}' has gazetteer features but no gazetteer block "
            "({reason}). Save and load the whole component directory, or retrain.")
    # S420-S429: averaging pipelines trained alike (spacy_structperc/averaging.py).
    S420 = ("Averaging needs at least two pipelines; got {n}. Train the config again with another "
            "[system] seed and average the copies.")
    S421 = ("Pipeline {i} has the components {names}, the first {first}: only copies of one config, "
            "trained with different seeds, can be averaged.")
    S422 = ("Component '{name}' of pipeline {i} has other labels (or labels in another order) than "
            "the first pipeline's: the copies must be trained on the same data with the same label "
            "files.")
    S423 = ("Component '{name}' of pipeline {i} has other settings than the first pipeline's ({keys}): "
            "only copies of one config, trained with different seeds, can be averaged.")
    S424 = ("Cannot average component '{name}': it has no single table of structured-perceptron "
            "weights (the clause identifier has several; a parser with a reranker has the reranker "
            "its copy trained), or is not among those averaged. Components that can be: {available}.")
    S425 = ("prune_below for component '{name}' must be a number >= 0; got {value!r}.")
    # S430-S439: jackknifed tags (spacy_structperc/jackknife.py) and the reader that reads them.
    S430 = ("Doc {i} of {path} has no jackknifed tags (one string per token in "
            "doc.user_data['structperc_jackknifed_tags']), which predicted_tags = true reads. Make "
            "the file with `python -m spacy_structperc jackknife CONFIG TRAIN OUTPUT`, or set "
            "predicted_tags = false.")
    S431 = ("jackknife: folds must be an integer from 2 to the number of training Docs ({n}); got "
            "{value!r}.")
    S432 = ("jackknife: the pipeline trained from {config} has no component '{component}' (it has "
            "{names}); pass --component with the name of its tagger.")
    S433 = ("predicted_tags = true of the {reader} reader needs sentences_per_doc = 0 and "
            "gold_preproc = true: the stored tags are one per gold token of each stored Doc.")


class Warnings(metaclass=ErrorsWithCodes):
    W001 = ("Component '{name}' skipped {n} example(s) in this batch whose tokenization could not "
            "be aligned with the gold standard.")
    W002 = ("{path}: {n} chunk tag(s) I-X do not continue a chunk of type X (first at line "
            "{line}); they were read as conlleval reads them, each starting a new chunk.")
    W003 = ("Component '{name}' has reset_every = {k} (modified parameter averaging) but has not "
            "been told which epoch it is in, so its weights will never be reset to their average. "
            "Add [training.before_update] @callbacks = \"spacy-structperc.epoch_hook.v1\" to the "
            "config, or call start_epoch(epoch) yourself; set reset_every = 0 to silence this.")
    # structperc_clauses (W200-W209)
    W200 = ("Component '{name}' ignored {n} gold clause(s) while training: {reason}. Clauses must nest "
            "or be disjoint, and lie inside one sentence of the Doc; fix the corpus or the Doc's "
            "sentence boundaries to train on them.")
    # NER corpus readers (W010-W019)
    W010 = ("{path}: {n} tag(s) I-X do not continue an entity of type X (first at line {line}), "
            "which IOB2 does not allow; they were read as conlleval reads them, each starting a "
            "new entity. If the file is IOB1, read it with spacy-structperc.conll2003_reader.v1.")


def warn(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=3)
